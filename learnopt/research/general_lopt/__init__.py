"""The notes' library's ``research/general_lopt`` path (see :mod:`learnopt.research`)."""
