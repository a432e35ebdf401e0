"""A ``django.tasks`` task: Django's own API, run by django-rqueue's workers.

``TASKS`` in ``example_project/settings.py`` names
``django_rqueue.backends.RQueueBackend``, so ``send_welcome_email.enqueue(...)``
writes an ordinary django-rqueue job on the ``emails`` queue (its timeout and
attempts are that queue's), which ``rqueue_work`` runs.
"""

from django.core.mail import send_mail

from django_rqueue.tasks_api import task


@task(queue_name="emails")
def send_welcome_email(email: str) -> str:
    """Email a welcome message to ``email``; return its subject."""
    subject = "Welcome to the django-rqueue demo"
    send_mail(
        subject=subject,
        message="This email was sent by a django.tasks task that a django-rqueue worker ran.\n",
        from_email=None,
        recipient_list=[email],
    )
    return subject
