"""The Train page (pages/1_Train.py): its settings and their URL form, the corpus, starting runs and
reading them, the live race chart, the memory race, the class board switch."""
