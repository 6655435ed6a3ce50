"""Home (app.py): the model families' equations and the presets' table."""
