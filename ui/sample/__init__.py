"""The Sample page (pages/2_Sample.py): its settings, the four strategies' columns, stateful against
stateless, what drove a character, and the typing box."""
