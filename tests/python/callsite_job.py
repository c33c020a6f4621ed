"""A Python job that launches through ctypes (which releases the GIL around the call, as PyTorch's op bindings do):
it runs one scenario of the test client's library (libtg_client.so) against the stand-in driver, from the main thread
or from a second Python thread. tests/processes/test_callsite.cpp runs it preloaded and checks that the record names this
file, the function below and the line marked LAUNCH.

    python3 callsite_job.py LIBTG_CLIENT SCENARIO [main|thread]
"""
import ctypes
import sys
import threading


def launch_from_python(lib, scenario):
    argv = [b"tg_client", b"getproc", b"ex", scenario.encode()]
    args = (ctypes.c_char_p * len(argv))(*argv)
    return lib.tg_client_run(len(argv), args)  # LAUNCH


def main():
    lib = ctypes.CDLL(sys.argv[1])
    where = sys.argv[3] if len(sys.argv) > 3 else "main"
    result = []
    if where == "thread":
        t = threading.Thread(target=lambda: result.append(launch_from_python(lib, sys.argv[2])), name="launcher")
        t.start()
        t.join()
    else:
        result.append(launch_from_python(lib, sys.argv[2]))
    sys.exit(result[0])


if __name__ == "__main__":
    main()
