"""Task families with sampled configurations (the notes' library's ``tasks.parametric``)."""
