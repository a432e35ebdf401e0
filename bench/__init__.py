"""Side-by-side benchmark of django-rqueue and its peers (see bench/README.md)."""
