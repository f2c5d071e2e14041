from policydsl.cli import entry_point

entry_point()
