"""The Memory page (pages/4_Memory.py): its settings and defaults, its five sections and the probe."""
