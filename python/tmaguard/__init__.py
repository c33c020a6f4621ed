"""tmaguard for Python environments: the preloaded library, its helper and the `tmaguard` command, installed by pip.

The command is the same as the installed tree's (`tmaguard -- CMD`, `inspect`, `check-rules`, `report`, `demo`,
`--version`); `python -m tmaguard` runs it too. A few helpers save work when a Python launcher starts the job:

    import subprocess, tmaguard
    env = tmaguard.environment(mode="reject", log="/tmp/tg.%p.jsonl", json=True)
    subprocess.run(["python", "train.py"], env=env)
    records = tmaguard.read_log("/tmp/tg.1234.jsonl")

Inside a guarded job, the tensors a call hands to its kernels can be declared, so that every tensor map pointing into
one is judged against the tensor itself (`tmaguard.torch.watch()` does it for FlashAttention-4's calls):

    with tmaguard.declared(q=q, k=k, v=v, out=o):
        attention(q, k, v, out=o)
"""
import json as _json
import os
import subprocess
import sys

from tmaguard._declare import declared

__all__ = ["install_dir", "library_path", "command", "environment", "preload_problem", "PreloadError", "read_log",
           "declared"]

MODES = ("abort", "reject", "log", "inspect", "off")


class PreloadError(RuntimeError):
    """ld.so cannot preload the library on this node (missing, damaged, or built for a newer glibc): a child started
    with it would run unguarded (ld.so only warns) or fail with ld.so's own message."""


def install_dir():
    """The installed tree (bin/, lib/, libexec/, share/) that ships inside this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_install")


def _source_tree():
    """The source tree this package sits in (python/tmaguard of a checkout), or None when it was installed by pip."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(root, "scripts", "tmaguard")) and os.path.isfile(os.path.join(root, "CMakeLists.txt")):
        return root
    return None


def library_path():
    """libtmaguard.so, to put in LD_PRELOAD: TMAGUARD_LIB when set (as for the `tmaguard` command), else the one this
    package installed, else, in a source tree, the build's (build/libtmaguard.so)."""
    if os.environ.get("TMAGUARD_LIB"):
        return os.environ["TMAGUARD_LIB"]
    installed = os.path.join(install_dir(), "lib", "libtmaguard.so")
    root = _source_tree()
    if os.path.exists(installed) or root is None:
        return installed
    return os.path.join(root, "build", "libtmaguard.so")


def command():
    """The `tmaguard` wrapper script (bash), as `[bash, path]`: the installed one, else the source tree's."""
    installed = os.path.join(install_dir(), "bin", "tmaguard")
    root = _source_tree()
    if os.path.exists(installed) or root is None:
        return ["/bin/bash", installed]
    return ["/bin/bash", os.path.join(root, "scripts", "tmaguard")]


_checked = {}  # (path, size, mtime) -> preload_problem's answer, so that a launcher may call environment() per rank


def preload_problem(lib=None):
    """None when ld.so can preload `lib` (default: library_path()) on this node, else why not, in one line: the
    answer of `tmaguard check-preload`, the check the command makes before it starts a job (it preloads the library
    into `env true`; the library does nothing at load time in a process that never touches CUDA)."""
    lib = library_path() if lib is None else lib
    try:
        st = os.stat(lib)
    except OSError as e:
        return f"{lib}: {e.strerror}"
    key = (lib, st.st_size, st.st_mtime_ns)
    if key not in _checked:
        try:
            p = subprocess.run(command() + ["check-preload"], env=dict(os.environ, TMAGUARD_LIB=lib),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
            err = p.stderr.decode("utf-8", "replace").strip()
            line = err.splitlines()[-1] if err else f"tmaguard check-preload exited with {p.returncode}"
            said = f"tmaguard: cannot preload {lib} on this node: "
            _checked[key] = None if p.returncode == 0 else line[len(said):] if line.startswith(said) else line
        except (OSError, subprocess.SubprocessError) as e:
            _checked[key] = f"cannot run tmaguard check-preload: {e}"
    return _checked[key]


def environment(mode=None, log=None, json=False, rules=None, base=None):
    """A copy of `base` (default: os.environ) that preloads tmaguard into a child process.

    mode: abort, reject, log, inspect or off; log: a path (%p becomes the pid); json: JSON-lines records;
    rules: a rule file (str or path-like) or a list of them. Another mode, a rules file name with a ':' (TMAGUARD_RULES
    splits on it), an inherited TMAGUARD_MODE=off without a mode given (the child would run unguarded), or an
    install path with a space or a colon (LD_PRELOAD splits on them): ValueError. A library ld.so cannot preload on this node (preload_problem): PreloadError, so
    that no child is started unguarded.
    """
    if mode is not None and mode not in MODES:
        raise ValueError(f"tmaguard mode {mode!r} is not one of {', '.join(MODES)}")
    source = os.environ if base is None else base
    if mode is None and str(source.get("TMAGUARD_MODE", "")).strip().lower() == "off":
        raise ValueError("TMAGUARD_MODE=off is set in the environment, so the child would run unguarded; unset it, "
                         "or pass mode= (mode='off' runs it without tmaguard on purpose)")
    if rules is None or isinstance(rules, (str, os.PathLike)):
        files = [] if rules is None else [os.fspath(rules)]
    else:
        files = [os.fspath(r) for r in rules]
    for f in files:
        if ":" in f or not f.strip():
            raise ValueError(f"rules file {f!r}: TMAGUARD_RULES separates files with ':', so a file name can be "
                             "neither empty nor hold one")
    lib = library_path()
    if " " in lib or ":" in lib:
        raise ValueError(f"tmaguard is installed under {lib!r}, a path LD_PRELOAD cannot carry (space or colon)")
    problem = preload_problem(lib)
    if problem:
        raise PreloadError(f"cannot preload {lib} on this node: {problem}")
    env = dict(source)
    env["LD_PRELOAD"] = lib + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    if mode is not None:
        env["TMAGUARD_MODE"] = mode
    if log is not None:
        env["TMAGUARD_LOG"] = log
    if json:
        env["TMAGUARD_LOG_FORMAT"] = "json"
    if files:
        env["TMAGUARD_RULES"] = ":".join(([env["TMAGUARD_RULES"]] if env.get("TMAGUARD_RULES") else []) + files)
    return env


def read_log(path):
    """The records of a JSON-lines log (TMAGUARD_LOG_FORMAT=json) as dicts. A line that is not a JSON object (a
    truncated write, another program's output, nesting too deep to read) is skipped; a log written in the text
    format (every record a `tmaguard: ...` line) is a ValueError that says so, not an empty list."""
    records = []
    text_lines = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                record = _json.loads(line)
            except (ValueError, RecursionError):
                text_lines += line.startswith("tmaguard: ")
                continue
            if isinstance(record, dict):
                records.append(record)
    if not records and text_lines:
        raise ValueError(f"{path} is a text-format log; read_log reads JSON-lines logs (TMAGUARD_LOG_FORMAT=json, "
                         "or json=True in tmaguard.environment())")
    return records


def main(argv=None):
    """`tmaguard ARGS...`: runs the wrapper with these arguments, in this process's place."""
    args = sys.argv[1:] if argv is None else list(argv)
    cmd = command()
    os.execv(cmd[0], cmd + args)
