"""Home (app.py): the presets' table (the model families' equations are drawn by app.py itself)."""
