"""tmaguard for Python environments: the preloaded library, its helper and the `tmaguard` command, installed by pip.

The command is the same as the installed tree's (`tmaguard -- CMD`, `inspect`, `check-rules`, `report`, `demo`,
`--version`); `python -m tmaguard` runs it too. A few helpers save work when a Python launcher starts the job:

    import subprocess, tmaguard
    env = tmaguard.environment(mode="reject", log="/tmp/tg.%p.jsonl", json=True)
    subprocess.run(["python", "train.py"], env=env)
    records = tmaguard.read_log("/tmp/tg.1234.jsonl")
"""
import json as _json
import os
import sys

__all__ = ["install_dir", "library_path", "command", "environment", "read_log"]


def install_dir():
    """The installed tree (bin/, lib/, libexec/, share/) that ships inside this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_install")


def library_path():
    """libtmaguard.so, to put in LD_PRELOAD."""
    return os.path.join(install_dir(), "lib", "libtmaguard.so")


def command():
    """The `tmaguard` wrapper script (bash), as `[bash, path]`."""
    return ["/bin/bash", os.path.join(install_dir(), "bin", "tmaguard")]


def environment(mode=None, log=None, json=False, rules=None, base=None):
    """A copy of `base` (default: os.environ) that preloads tmaguard into a child process.

    mode: abort, reject, log, inspect or off; log: a path (%p becomes the pid); json: JSON-lines records;
    rules: a rule file or a list of them. An install path with a space or a colon cannot be preloaded (LD_PRELOAD
    splits on them): ValueError.
    """
    lib = library_path()
    if " " in lib or ":" in lib:
        raise ValueError(f"tmaguard is installed under {lib!r}, a path LD_PRELOAD cannot carry (space or colon)")
    env = dict(os.environ if base is None else base)
    env["LD_PRELOAD"] = lib + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    if mode is not None:
        env["TMAGUARD_MODE"] = mode
    if log is not None:
        env["TMAGUARD_LOG"] = log
    if json:
        env["TMAGUARD_LOG_FORMAT"] = "json"
    if rules:
        files = [rules] if isinstance(rules, str) else list(rules)
        env["TMAGUARD_RULES"] = ":".join(([env["TMAGUARD_RULES"]] if env.get("TMAGUARD_RULES") else []) + files)
    return env


def read_log(path):
    """The records of a JSON-lines log (TMAGUARD_LOG_FORMAT=json) as dicts; a line that is not JSON is skipped."""
    records = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                records.append(_json.loads(line))
            except ValueError:
                continue
    return records


def main(argv=None):
    """`tmaguard ARGS...`: runs the wrapper with these arguments, in this process's place."""
    args = sys.argv[1:] if argv is None else list(argv)
    cmd = command()
    os.execv(cmd[0], cmd + args)
