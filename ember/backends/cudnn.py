"""``ember.backends.cudnn`` (torch.backends.cudnn): flags torch programs set; ember has no
cuDNN, so ``is_available()`` is False and the flags change nothing (``deterministic`` aside:
ember's CPU kernels are deterministic)."""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    """False: ember has no cuDNN."""
    return False


def version():
    """None, as torch answers without cuDNN."""
    return None
