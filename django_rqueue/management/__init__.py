"""The management commands of django-rqueue (``manage.py rqueue_*``) and what they share."""
