"""What the hack scripts share: the client layer (kube), the books, the checkers, the installer."""
