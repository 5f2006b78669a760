"""Hidden checks, one file per exercise (``<module>.py`` with ``checks(draw)``): more cases of the
same rules, drawn from their own names. Never released; a failed hidden check reports its rule,
never the values (nor anything its worker said)."""
