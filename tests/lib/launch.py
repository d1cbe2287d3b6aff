"""What starting a service on this machine takes, for every test harness
(tests/integration, tests/cloud): a free loopback port, and an oslo.config
INI file written from {section: {option: value}}. Standard library only,
so any of the project's virtualenvs can import it."""
import socket


def free_port():
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def write_conf(path, sections):
    """Writes {section: {option: value}} as an INI file at `path`; answers
    `path`."""
    with open(path, 'w') as f:
        for section, options in sections.items():
            f.write('[%s]\n' % section)
            for key, value in options.items():
                f.write('%s = %s\n' % (key, value))
            f.write('\n')
    return path
