"""Helpers of the ``ffrecord.torch`` tests, and scripts those tests run as child processes.

Scripts run as ``python -m torch_scripts.<name>`` with ``tests/`` as the working directory.
"""
