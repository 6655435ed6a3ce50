"""The lab's one error type: every refusal of a user's input (a setting, a text, a file) is a LabError
whose one-line message names the field or value at fault.

LabError is a ValueError, so `except ValueError` still catches it; the pages and the CLI show its
message as it is. Any other exception that reaches them is a bug in the lab: they show one line
and write the traceback to the server's log.
"""


class LabError(ValueError):
    """Bad input, refused with a one-line message that names what was wrong."""
