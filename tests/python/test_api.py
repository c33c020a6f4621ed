"""The wheel's Python API (python/tmaguard): the environment a launcher gives a child, and reading a JSON log."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tmaguard  # noqa: E402


class Environment(unittest.TestCase):
    def test_preloads_the_library_first_and_sets_what_is_asked(self):
        env = tmaguard.environment(mode="reject", log="/tmp/tg.%p.jsonl", json=True, rules=["a.toml", "b.toml"],
                                   base={"LD_PRELOAD": "/other.so", "TMAGUARD_RULES": "x.toml", "PATH": "/bin"})
        self.assertEqual(env["LD_PRELOAD"], tmaguard.library_path() + ":/other.so")
        self.assertEqual(env["TMAGUARD_MODE"], "reject")
        self.assertEqual(env["TMAGUARD_LOG"], "/tmp/tg.%p.jsonl")
        self.assertEqual(env["TMAGUARD_LOG_FORMAT"], "json")
        self.assertEqual(env["TMAGUARD_RULES"], "x.toml:a.toml:b.toml")
        self.assertEqual(env["PATH"], "/bin")
        self.assertTrue(tmaguard.library_path().endswith("tmaguard/_install/lib/libtmaguard.so"))

    def test_leaves_the_base_alone_and_sets_nothing_unasked(self):
        base = {"PATH": "/bin"}
        env = tmaguard.environment(base=base)
        self.assertEqual(base, {"PATH": "/bin"})
        self.assertNotIn("TMAGUARD_MODE", env)
        self.assertEqual(env["LD_PRELOAD"], tmaguard.library_path())


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
