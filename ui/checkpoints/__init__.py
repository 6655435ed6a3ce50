"""The Checkpoints page (pages/5_Checkpoints.py): the list, one checkpoint in detail, deleting and
uploading."""
