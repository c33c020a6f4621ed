"""The wheel's Python API (python/tmaguard): the environment a launcher gives a child, and reading a JSON log."""
import json
import os
import sys
import shutil
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tmaguard  # noqa: E402

# The build's library (ctest passes it), and the source tree's command: the source tree's package has no _install/
# of its own.
BUILT = os.environ["TMAGUARD_TEST_LIB"]
INSTALLED = tmaguard.library_path()
COMMAND = ["/bin/bash", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "tmaguard")]


def with_library(path):
    return mock.patch.object(tmaguard, "library_path", lambda: path)


class Environment(unittest.TestCase):
    def setUp(self):
        for patcher in (with_library(BUILT), mock.patch.object(tmaguard, "command", lambda: list(COMMAND))):
            patcher.start()
            self.addCleanup(patcher.stop)
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_preloads_the_library_first_and_sets_what_is_asked(self):
        env = tmaguard.environment(mode="reject", log="/tmp/tg.%p.jsonl", json=True, rules=["a.toml", "b.toml"],
                                   base={"LD_PRELOAD": "/other.so", "TMAGUARD_RULES": "x.toml", "PATH": "/bin"})
        self.assertEqual(env["LD_PRELOAD"], tmaguard.library_path() + ":/other.so")
        self.assertEqual(env["TMAGUARD_MODE"], "reject")
        self.assertEqual(env["TMAGUARD_LOG"], "/tmp/tg.%p.jsonl")
        self.assertEqual(env["TMAGUARD_LOG_FORMAT"], "json")
        self.assertEqual(env["TMAGUARD_RULES"], "x.toml:a.toml:b.toml")
        self.assertEqual(env["PATH"], "/bin")
        self.assertTrue(INSTALLED.endswith("tmaguard/_install/lib/libtmaguard.so"))

    def test_leaves_the_base_alone_and_sets_nothing_unasked(self):
        base = {"PATH": "/bin"}
        env = tmaguard.environment(base=base)
        self.assertEqual(base, {"PATH": "/bin"})
        self.assertNotIn("TMAGUARD_MODE", env)
        self.assertEqual(env["LD_PRELOAD"], tmaguard.library_path())

    def test_an_unknown_mode_is_refused_by_name(self):
        with self.assertRaisesRegex(ValueError, r"mode 'abrot' is not one of abort, reject, log, inspect, off"):
            tmaguard.environment(mode="abrot")
        for mode in tmaguard.MODES:
            self.assertEqual(tmaguard.environment(mode=mode, base={})["TMAGUARD_MODE"], mode)

    def refused(self, lib):
        with with_library(lib):
            with self.assertRaises(tmaguard.PreloadError) as caught:
                tmaguard.environment(mode="abort")
        text = str(caught.exception)
        self.assertNotIn("\n", text)
        self.assertTrue(text.startswith(f"cannot preload {lib} on this node: "), text)
        return text

    def test_a_missing_library_starts_no_child(self):
        self.assertIn("No such file or directory", self.refused(os.path.join(self.tmp, "libtmaguard.so")))

    def test_a_damaged_library_starts_no_child(self):
        lib = os.path.join(self.tmp, "libtmaguard.so")
        with open(lib, "w") as f:
            f.write("not a library\n")
        text = self.refused(lib)
        self.assertIn("cannot be preloaded", text)  # ld.so's own reason, which alone would only warn

    def test_a_build_for_a_newer_glibc_starts_no_child_and_says_which_packages_load(self):
        lib = os.path.join(self.tmp, "libtmaguard.so")
        with open(BUILT, "rb") as f:
            data = f.read()
        newer = bytearray(data)
        for minor in range(30, 40):  # GLIBC_2.3x -> GLIBC_2.9x: versions no glibc has
            newer = newer.replace(f"GLIBC_2.{minor}".encode(), f"GLIBC_2.{minor + 60}".encode())
        self.assertNotEqual(bytes(newer), data)
        with open(lib, "wb") as f:
            f.write(newer)
        text = self.refused(lib)
        self.assertIn("GLIBC_2.9", text)
        self.assertIn("needs a newer glibc", text)

    def test_a_library_that_loads_is_tried_once(self):
        calls = []
        real_run = tmaguard.subprocess.run

        def counting(*a, **k):
            calls.append(a)
            return real_run(*a, **k)

        lib = os.path.join(self.tmp, "libtmaguard.so")
        shutil.copy(BUILT, lib)
        with with_library(lib), mock.patch.object(tmaguard.subprocess, "run", counting):
            tmaguard.environment()
            tmaguard.environment(mode="log")
        self.assertEqual(len(calls), 1)


class ReadLog(unittest.TestCase):
    def test_records_as_dicts_and_junk_skipped(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write(json.dumps({"event": "violation", "rule": "fa4-dk-not-k-major"}) + "\n\nnot json\n")
            f.write(json.dumps({"event": "summary", "launches_seen": 3}) + "\n")
        try:
            records = tmaguard.read_log(f.name)
        finally:
            os.remove(f.name)
        self.assertEqual([r["event"] for r in records], ["violation", "summary"])


if __name__ == "__main__":
    unittest.main()
