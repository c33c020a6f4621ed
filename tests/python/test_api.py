"""The wheel's Python API (python/tmaguard): the environment a launcher gives a child, and reading a JSON log."""
import contextlib
import ctypes
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
SOURCE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
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

    def test_an_inherited_mode_off_is_refused_unless_a_mode_is_given(self):
        for value in ("off", " OFF "):
            with self.assertRaisesRegex(ValueError, r"TMAGUARD_MODE=off is set in the environment, so the child "
                                                    r"would run unguarded"):
                tmaguard.environment(base={"TMAGUARD_MODE": value})
        self.assertEqual(tmaguard.environment(mode="reject", base={"TMAGUARD_MODE": "off"})["TMAGUARD_MODE"], "reject")
        self.assertEqual(tmaguard.environment(mode="off", base={})["TMAGUARD_MODE"], "off")

    def test_rules_may_be_paths_and_never_hold_a_colon(self):
        import pathlib
        env = tmaguard.environment(rules=pathlib.Path("/etc/tmaguard/a.toml"), base={})
        self.assertEqual(env["TMAGUARD_RULES"], "/etc/tmaguard/a.toml")
        env = tmaguard.environment(rules=[pathlib.Path("a.toml"), "b.toml"], base={})
        self.assertEqual(env["TMAGUARD_RULES"], "a.toml:b.toml")
        for bad in ("x:y.toml", ["a.toml", ""]):
            with self.assertRaisesRegex(ValueError, r"TMAGUARD_RULES separates files with ':'"):
                tmaguard.environment(rules=bad, base={})

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

    def write(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write(text)
        self.addCleanup(os.remove, f.name)
        return f.name

    def test_a_text_log_is_said_to_be_one(self):
        path = self.write("tmaguard: violation: fa4-dk-not-k-major ...\ntmaguard: SUMMARY: 3 launches seen\n")
        with self.assertRaisesRegex(ValueError, r"is a text-format log; read_log reads JSON-lines logs"):
            tmaguard.read_log(path)

    def test_nesting_too_deep_and_non_objects_are_skipped(self):
        path = self.write("[" * 100000 + "]" * 100000 + "\n[1, 2]\n" + json.dumps({"event": "summary"}) + "\n")
        self.assertEqual(tmaguard.read_log(path), [{"event": "summary"}])


class Command(unittest.TestCase):
    """The `tmaguard` command (scripts/tmaguard) with the build's library."""

    def run_command(self, *args, env=None):
        import subprocess
        full = dict(os.environ, TMAGUARD_LIB=BUILT, **(env or {}))
        return subprocess.run(COMMAND + list(args), env=full, capture_output=True, text=True, timeout=60)

    def test_an_inherited_mode_off_is_refused_unless_a_mode_is_given(self):
        p = self.run_command("--", "true", env={"TMAGUARD_MODE": "off"})
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("TMAGUARD_MODE=off is set in the environment, so the job would run unguarded", p.stderr)
        p = self.run_command("--mode", "off", "--", "true", env={"TMAGUARD_MODE": "off"})
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.run_command("--mode", "log", "--", "sh", "-c", 'echo "$TMAGUARD_MODE"', env={"TMAGUARD_MODE": "off"})
        self.assertEqual((p.returncode, p.stdout), (0, "log\n"), p.stderr)

    def test_a_command_starting_with_a_dash_is_the_command(self):
        # bash's exec would take -c as its own option (clear the environment) and run the rest unguarded
        p = self.run_command("--", "-c", "true")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("-c", p.stderr)
        p = self.run_command("--", "env")
        self.assertIn("LD_PRELOAD=" + BUILT, p.stdout)

    def test_a_rules_path_with_a_colon_is_refused_as_such(self):
        p = self.run_command("--rules", "/tmp/a:b.toml", "--", "true")
        self.assertEqual(p.returncode, 2)
        self.assertIn("holds a ':', which TMAGUARD_RULES uses to separate files", p.stderr)


class FromASourceTree(unittest.TestCase):
    """The package imported from a checkout (python/ on sys.path, no _install/): it uses the build's library and the
    source tree's command, and TMAGUARD_LIB wins, as it does for the command."""

    def test_the_build_library_and_the_source_command(self):
        with mock.patch.dict(os.environ, {"TMAGUARD_LIB": ""}):
            self.assertEqual(tmaguard.library_path(), os.path.join(SOURCE, "build", "libtmaguard.so"))
        self.assertEqual(tmaguard.command(), ["/bin/bash", os.path.join(SOURCE, "scripts", "tmaguard")])

    def test_tmaguard_lib_wins(self):
        with mock.patch.dict(os.environ, {"TMAGUARD_LIB": BUILT}):
            self.assertEqual(tmaguard.library_path(), BUILT)
            env = tmaguard.environment(mode="log", base={"PATH": "/bin:/usr/bin"})
            self.assertEqual(env["LD_PRELOAD"], BUILT)

    def test_environment_works_without_an_install(self):
        if os.path.realpath(BUILT) != os.path.realpath(os.path.join(SOURCE, "build", "libtmaguard.so")):
            self.skipTest("the build under test is not build/ of this source tree")
        with mock.patch.dict(os.environ, {"TMAGUARD_LIB": ""}):
            env = tmaguard.environment(mode="log", base={"PATH": "/bin:/usr/bin"})
        self.assertEqual(os.path.realpath(env["LD_PRELOAD"]), os.path.realpath(BUILT))



class Declared(unittest.TestCase):
    """tmaguard.declared and tmaguard.torch.watch, without the library (ctest's python_api does not preload it; the
    preloaded path is tests/processes/test_tensors.cpp's)."""

    def test_a_tensor_is_read_through_its_methods_or_an_array_interface(self):
        class Torchlike:
            shape = (2, 3)

            def data_ptr(self):
                return 4096

            def stride(self):
                return (1, 2)

            def element_size(self):
                return 4

        self.assertEqual(tmaguard._declare.metadata(Torchlike()), (4096, (2, 3), (1, 2), 4))

        class Contiguous:
            __cuda_array_interface__ = {"data": (8192, False), "shape": (2, 3, 4), "typestr": "<f2", "strides": None}

        self.assertEqual(tmaguard._declare.metadata(Contiguous()), (8192, (2, 3, 4), (12, 4, 1), 2))

        class Strided:
            __array_interface__ = {"data": (64, False), "shape": (3, 5), "typestr": "<f4", "strides": (4, 12)}

        self.assertEqual(tmaguard._declare.metadata(Strided()), (64, (3, 5), (1, 3), 4))
        with self.assertRaises(TypeError):
            tmaguard._declare.metadata(object())

    def test_a_tensor_is_read_through_a_dlpack_capsule(self):
        d = tmaguard._declare
        shape = (ctypes.c_int64 * 3)(2, 3, 4)
        strides = (ctypes.c_int64 * 3)(1, 2, 6)
        managed = (ctypes.c_byte * 256)()  # DLManagedTensor: the DLTensor first, then manager context and deleter
        dl = d._DLTensor.from_buffer(managed)
        dl.data, dl.ndim, dl.byte_offset = 65536, 3, 512
        dl.dtype = d._DLDataType(2, 16, 1)  # float16
        dl.shape, dl.strides = shape, strides
        new = ctypes.pythonapi.PyCapsule_New
        new.argtypes, new.restype = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p], ctypes.py_object

        class Exporter:
            def __init__(self, name, at):
                self.name, self.at = name, at

            def __dlpack__(self, stream=None):
                return new(ctypes.addressof(managed) + self.at, self.name, None)

        self.assertEqual(d.metadata(Exporter(b"dltensor", 0)), (66048, (2, 3, 4), (1, 2, 6), 2))
        dl.strides = ctypes.POINTER(ctypes.c_int64)()  # NULL: C-contiguous
        self.assertEqual(d.metadata(Exporter(b"dltensor", 0))[2], (12, 4, 1))
        versioned = (ctypes.c_byte * 512)()  # DLManagedTensorVersioned: version, manager, deleter, flags, DLTensor
        ctypes.memmove(ctypes.addressof(versioned) + 8 + 3 * ctypes.sizeof(ctypes.c_void_p), managed, 64)

        class Versioned:
            def __dlpack__(self, stream=None):
                return new(ctypes.addressof(versioned), b"dltensor_versioned", None)

        self.assertEqual(d.metadata(Versioned())[:2], (66048, (2, 3, 4)))
        with self.assertRaises(TypeError):
            d.metadata(Exporter(b"something_else", 0))

    def test_without_the_library_a_block_is_a_no_op(self):
        self.assertFalse(tmaguard._declare.active())
        with tmaguard.declared(q=object()):  # not even read
            pass

    def test_watch_declares_nothing_and_wraps_nothing_without_the_library(self):
        import tmaguard.torch as tt
        self.assertEqual(tt.watch("no_such_module_here"), [])
        self.assertEqual(tt.watch("json", ("dumps",)), [])
        fn = json.dumps
        self.assertIs(tt.declaring(fn), fn)


class Recorder:
    """Stands in for the library's tmaguard_declare_tensors and tmaguard_end_declaration_to (C function pointers made
    from Python): keeps the thread's depth as the library does and records every tensor each call hands over."""

    DECLARE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int))
    END = ctypes.CFUNCTYPE(None, ctypes.c_int)

    def __init__(self):
        self.depth, self.calls, self.ends = 0, [], []
        self.declare, self.end = self.DECLARE(self._declare), self.END(self._end)

    def _declare(self, array, count, depth_out):
        if depth_out:
            depth_out[0] = self.depth
        tensors = ctypes.cast(array, ctypes.POINTER(tmaguard._declare._Tensor))
        got = []
        for i in range(count):
            t = tensors[i]
            got.append((t.name.decode(), t.data or 0, tuple(t.shape[j] for j in range(t.rank)),
                        tuple(t.strides[j] for j in range(t.rank)), t.element_size))
        if count:
            self.calls.append(got)
        self.depth += count
        return 0

    def _end(self, depth):
        self.ends.append(depth)
        self.depth = min(self.depth, depth)

    def declared(self):
        return [t for call in self.calls for t in call]


def address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


class Tensor:
    """PyTorch's face of a tensor: data_ptr(), shape, stride(), element_size()."""

    def __init__(self, data, shape=(2, 3), strides=(3, 1), size=2):
        self.data, self.shape, self.strides, self.size = data, shape, strides, size

    def data_ptr(self):
        return self.data

    def stride(self):
        return self.strides

    def element_size(self):
        return self.size


class Fake(Tensor):  # torch.compile's fake tensors have no storage
    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")


class Backends(unittest.TestCase):
    """Both ways a block reaches the library, against a recording stand-in: the C extension (as built: ctest passes
    its path) and ctypes."""

    def each_backend(self):
        """(name, recorder, context): the context makes the backend the helper's for its duration."""
        d = tmaguard._declare
        for name in ("speedups", "ctypes"):
            rec = Recorder()
            if name == "speedups":
                api = d._load_extension(os.environ["TMAGUARD_TEST_SPEEDUPS"])
                self.assertIsNotNone(api, "the built C extension does not load")
                api.bind(address(rec.declare), address(rec.end), d.metadata)
            else:
                api = d._CtypesBackend(rec.declare, rec.end)
            stack = contextlib.ExitStack()
            stack.enter_context(self.subTest(backend=name))
            for attr, value in (("_api", api), ("_looked", True), ("_backend_name", name)):
                stack.enter_context(mock.patch.object(d, attr, value))
            yield rec, stack

    def test_a_block_declares_its_tensors_in_one_call_and_its_exit_returns_to_the_depth_it_found(self):
        class Interface:  # read through metadata(): an array interface
            __array_interface__ = {"data": (65536, False), "shape": (3, 5), "typestr": "<f4", "strides": None}

        q, k = Tensor(4096, (2, 128, 4, 64), (32768, 64, 8192, 1)), Tensor(8192)
        for rec, backend in self.each_backend():
            with backend:
                with tmaguard.declared(q=q, skipped=None, k=k):
                    self.assertEqual(rec.calls, [[("q", 4096, (2, 128, 4, 64), (32768, 64, 8192, 1), 2),
                                                  ("k", 8192, (2, 3), (3, 1), 2)]])
                    with tmaguard.declared(arr=Interface()):
                        self.assertEqual(rec.calls[-1], [("arr", 65536, (3, 5), (5, 1), 4)])
                        self.assertEqual(rec.depth, 3)
                    self.assertEqual(rec.ends, [2], "the inner block returns to the outer block's depth")
                self.assertEqual(rec.ends, [2, 0])
                self.assertEqual(rec.depth, 0)

    def test_a_tensor_types_dtype_gives_each_tensor_the_element_size_its_method_gives(self):
        class DType:  # as torch.dtype: one object per type of element, its size as itemsize
            def __init__(self, itemsize):
                self.itemsize = itemsize

        half, single = DType(2), DType(4)

        class Typed(Tensor):
            def __init__(self, data, dtype):
                super().__init__(data, size=dtype.itemsize)
                self.dtype = dtype

        class Disagreeing(Tensor):  # a dtype whose itemsize is not element_size(): the method's answer counts
            dtype = DType(8)

        tensors = (Typed(64, half), Typed(128, single), Typed(192, half), Disagreeing(256), Disagreeing(320))
        for rec, backend in self.each_backend():
            with backend:
                for t in tensors:
                    with tmaguard.declared(t=t):
                        pass
                self.assertEqual([got[4] for got in rec.declared()], [2, 4, 2, 2, 2])

    def test_an_object_that_is_no_tensor_raises_and_leaves_nothing_declared(self):
        for rec, backend in self.each_backend():
            with backend:
                with self.assertRaises(TypeError):
                    with tmaguard.declared(q=Tensor(64), x=object()):
                        self.fail("the block ran")
                self.assertEqual(rec.depth, 0)

    def test_a_rank_over_eight_is_left_undeclared_and_more_than_sixteen_all_reach_the_library(self):
        wide = Tensor(64, tuple([1] * 9), tuple([1] * 9))
        many = {f"t{i}": Tensor(4096 * (i + 1)) for i in range(20)}
        for rec, backend in self.each_backend():
            with backend:
                with tmaguard.declared(wide=wide, **many):
                    self.assertEqual([t[0] for t in rec.declared()], list(many), "in order, the rank-9 one left out")
                self.assertEqual(rec.ends, [0])

    def test_watch_declares_a_calls_tensor_arguments_by_parameter_name(self):
        import types
        import tmaguard.torch as tt
        t = Tensor(64)
        for rec, backend in self.each_backend():
            with backend:
                fake = types.ModuleType("fake_fa4_interface")
                depth_inside = []

                def _flash_attn_bwd(q, k, v, out, dout, lse, softmax_scale=None, *extra, dq=None, **rest):
                    depth_inside.append(rec.depth)
                    return "result"

                fake._flash_attn_bwd = _flash_attn_bwd
                sys.modules["fake_fa4_interface"] = fake
                self.addCleanup(sys.modules.pop, "fake_fa4_interface", None)
                self.assertEqual(tt.watch("fake_fa4_interface", ("_flash_attn_bwd", "_flash_attn_fwd")),
                                 ["_flash_attn_bwd"])
                self.assertEqual(tt.watch("fake_fa4_interface", ("_flash_attn_bwd",)), ["_flash_attn_bwd"])
                # positional and keyword tensors by their parameter's name; nothing under *extra or **rest, no
                # non-tensor value; a fake tensor left out and the call run
                self.assertEqual(fake._flash_attn_bwd(Fake(0), t, t, t, t, t, 0.5, t, dq=t, other=t), "result")
                self.assertEqual(sorted(n for n, *_ in rec.declared()), ["dout", "dq", "k", "lse", "out", "v"])
                self.assertEqual(depth_inside, [6], "declared while the call runs, wrapped once")
                self.assertEqual(rec.depth, 0, "ended when it returns")
                with self.assertRaises(ZeroDivisionError):
                    tt.declaring(lambda q: 1 / 0)(t)
                self.assertEqual(rec.depth, 0, "ended when it raises")


if __name__ == "__main__":
    unittest.main()
