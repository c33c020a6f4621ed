"""Measures, in the running CPython (3.11 or 3.12), the structure offsets tmaguard reads Python frames with
(shim/callsite/python_frames.cpp, k311 / k312), by finding known objects' addresses inside the interpreter's own
structures, and prints them beside tmaguard's table: "PYLAYOUT field measured expected ok|MISMATCH".

    python3 python_layout.py
"""
import ctypes
import os
import sys

EXPECTED = {
    (3, 11): dict(tstate_cframe=56, cframe_current=8, frame_code=32, frame_previous=48, code_filename=112,
                  code_qualname=128, code_linetable=136, code_firstlineno=72),
    (3, 12): dict(tstate_cframe=56, cframe_current=0, frame_code=0, frame_previous=8, code_filename=112,
                  code_qualname=128, code_linetable=136, code_firstlineno=68),
}


MEM = open("/proc/self/mem", "rb", buffering=0)


def words(address, n):
    """n 64-bit words at `address`, read through /proc/self/mem: a bad address raises, never faults."""
    import struct
    data = os.pread(MEM.fileno(), 8 * n, address)
    if len(data) != 8 * n:
        raise OSError("short read")
    return list(struct.unpack(f"<{n}Q", data))


def find(haystack, value):
    return [8 * i for i, w in enumerate(haystack) if w == value]


def measure():
    out = {}
    code = measure.__code__
    co = words(id(code), 24)
    out["code_filename"] = find(co, id(code.co_filename))
    out["code_qualname"] = find(co, id(code.co_qualname))
    out["code_linetable"] = find(co, id(code.co_linetable))
    import struct
    ints = list(struct.unpack("<48i", os.pread(MEM.fileno(), 192, id(code))))
    out["code_firstlineno"] = [4 * i for i, v in enumerate(ints) if v == code.co_firstlineno]
    frame = sys._getframe()
    interp_frame = words(id(frame), 4)[3]  # struct _frame: PyObject_HEAD, f_back, f_frame
    caller_frame = words(id(frame.f_back), 4)[3]
    iframe = words(interp_frame, 10)
    out["frame_code"] = find(iframe, id(code))
    out["frame_previous"] = find(iframe, caller_frame)
    ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p
    tstate = ctypes.pythonapi.PyThreadState_Get()
    ts = words(tstate, 16)
    # the thread's _PyCFrame (on the C stack) holds the frame that is running now: ctypes' call frame, whose caller
    # chain reaches this one; find the word whose target holds a frame pointer chain containing interp_frame
    for off in range(0, 16 * 8, 8):
        cframe = ts[off // 8]
        if cframe < 4096:
            continue
        try:
            cf = words(cframe, 2)
        except Exception:  # noqa: BLE001
            continue
        for slot, f in enumerate(cf):
            for _ in range(8):
                if f == interp_frame:
                    out.setdefault("tstate_cframe", []).append(off)
                    out.setdefault("cframe_current", []).append(8 * slot)
                    break
                if f < 4096:
                    break
                try:
                    f = words(f, 10)[out["frame_previous"][0] // 8] if out["frame_previous"] else 0
                except Exception:  # noqa: BLE001
                    break
    return out


def main():
    measured = measure()
    expected = EXPECTED.get(sys.version_info[:2], {})
    print(f"PYLAYOUT python {sys.version.split()[0]}")
    bad = 0
    for field, want in expected.items():
        got = sorted(set(measured.get(field, [])))
        ok = want in got
        bad += not ok
        print(f"PYLAYOUT {field} measured={got} expected={want} {'ok' if ok else 'MISMATCH'}")
    print(f"PYLAYOUT {'all ok' if expected and not bad else 'MISMATCH' if bad else 'no table for this version'}")
    return 0 if expected and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
