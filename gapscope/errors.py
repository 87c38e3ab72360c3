"""The project's own error type: anything raised as GapscopeError is the user's problem, shown as one line."""


class GapscopeError(Exception):
    """A problem with the user's input or environment, reported as ``gapscope: error: <message>`` (exit 2)."""

    exit_code = 2

    def __init__(self, message: str):
        # One line, always: newlines in a message would break the one-line contract of the CLI.
        super().__init__(" ".join(str(message).split()))
