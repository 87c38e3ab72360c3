"""gapscope capture: record forward-pass traces with torch.profiler the way an expert would.

Imports only torch and the standard library, and torch only when a capture actually runs,
so that the package stays importable on machines without torch.
"""
