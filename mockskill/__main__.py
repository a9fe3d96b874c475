"""``python -m mockskill``: the same as the ``mockskill`` command."""

from mockskill.cli import main

if __name__ == "__main__":  # pragma: no branch
    main()
