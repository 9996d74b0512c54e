"""``python -m ffrecord …`` runs the ``ffrecord`` command line (see ``ffrecord.cli``)."""

from .cli import main

raise SystemExit(main())
