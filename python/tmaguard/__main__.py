"""python -m tmaguard ARGS...: the same as the `tmaguard` command."""
from tmaguard import main

if __name__ == "__main__":
    main()
