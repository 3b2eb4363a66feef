"""requests.exceptions: the classes the stand-in raises."""


class RequestException(IOError):
    pass


class ConnectionError(RequestException):
    pass


class HTTPError(RequestException):
    pass
