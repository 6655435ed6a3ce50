"""The Ablation page (pages/6_Ablation.py): the shipped study's answer and sections, and its live run."""
