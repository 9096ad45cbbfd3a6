"""The foundation every layer stands on: the one HTTP transport and its liveness watch, the typed run
configuration, errors, interrupts, phases and progress, YAML and tokenizer fingerprints, JSON comparison.

It imports nothing of the suite, the harness or the application (``tests/test_layout.py`` enforces it).
"""
