"""``python -m faceweave.cli``."""

from faceweave.cli import main

if __name__ == "__main__":
    main()
