"""The Class page (pages/8_Class.py): the class board's chart, leaderboard and teacher's controls."""
