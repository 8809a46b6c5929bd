"""Progress lines quote error messages verbatim: a message is never read as terminal markup."""

from pt2doctor.cli.progress import TerminalReporter


def test_an_error_message_with_brackets_is_printed_as_it_is(capsys):
    text = "run original-1: failed: RuntimeError: cannot lower [/bold] neg for shape [3] [link=x]"
    TerminalReporter().status(text)
    assert text in " ".join(capsys.readouterr().err.split())  # the terminal may wrap it
