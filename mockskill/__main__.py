"""``python -m mockskill``: the same as the ``mockskill`` command."""

from mockskill.launch import main

if __name__ == "__main__":  # pragma: no branch
    main()
