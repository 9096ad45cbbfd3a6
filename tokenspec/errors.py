"""The one exception type the CLI turns into a one-line message and exit code 2.

Anything a user can get wrong (a bad URL, an unreachable target, a model folder that is not one) raises
``UsageError`` with a sentence that says what to do; ``tokenspec.cli`` prints it without a traceback.
"""


class UsageError(Exception):
    """Bad input from the user or the environment; the message is shown as is, exit code 2."""
