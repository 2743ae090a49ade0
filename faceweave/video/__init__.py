"""Video: streaming decode, swap and encode."""
