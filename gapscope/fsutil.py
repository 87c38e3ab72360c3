"""Safe file writing: every file gapscope writes goes to a temporary name and is renamed into place."""

from __future__ import annotations

import os
import tempfile

from .errors import GapscopeError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, overwrite: bool = False) -> str:
    """Write ``data`` to ``path`` atomically. Refuses to replace an existing file unless ``overwrite``.

    On any failure (read-only folder, full disk) the previous state is left intact and a
    GapscopeError names the problem.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.exists(path) and not overwrite:
        raise GapscopeError(f"{path}: already exists (not overwritten; choose another name or pass --force)")
    if os.path.isdir(path):
        raise GapscopeError(f"{path}: is a directory")
    fd = None
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".gapscope-", suffix=".tmp", dir=folder)
        # mkstemp creates 0600; a report or an export should get the usual permissions (0666 less the umask)
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            fd = None
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            # link() fails if the name appeared meanwhile: never clobber a file created by someone else
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise GapscopeError(f"{path}: already exists (not overwritten)") from None
            except OSError:
                if os.path.exists(path):
                    raise GapscopeError(f"{path}: already exists (not overwritten)") from None
                os.replace(tmp, path)  # filesystems without hard links
        return path
    except GapscopeError:
        raise
    except OSError as exc:
        raise GapscopeError(f"{path}: cannot write ({exc.strerror or exc}); nothing was changed") from None
    finally:
        if fd is not None:
            os.close(fd)
        if tmp is not None and os.path.exists(tmp):
            try:
                os.unlink(tmp)
            except OSError:
                pass


def atomic_write_text(path: str | os.PathLike, text: str, *, overwrite: bool = False) -> str:
    return atomic_write_bytes(path, text.encode("utf-8"), overwrite=overwrite)


def shared_file() -> int:
    """A file descriptor that both sides of a later ``os.fork`` share, for a child to hand its results to its parent
    without a pipe: a memfd (Linux), else an unlinked temporary file. The caller closes it."""
    if hasattr(os, "memfd_create"):
        try:
            return os.memfd_create("gapscope", getattr(os, "MFD_CLOEXEC", 0))
        except OSError:  # pragma: no cover - no memfd on this kernel
            pass
    f = tempfile.TemporaryFile()  # noqa: SIM115 - only its descriptor is kept (dup'ed: the object may go)
    try:
        return os.dup(f.fileno())
    finally:
        f.close()
