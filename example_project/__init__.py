"""An example Django site that uses django-rqueue (run it with ``scripts/demo.sh``)."""
