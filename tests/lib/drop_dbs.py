#!/usr/bin/env python3
"""Drop every database whose name starts with the given prefix, on the
MariaDB and/or PostgreSQL servers named by the URLs given (test clean-up).

usage: drop_dbs.py PREFIX URL [URL ...]
"""
import sys
import urllib.parse


def main():
    prefix = sys.argv[1]
    for url in sys.argv[2:]:
        scheme, rest = url.split('://', 1)
        base = scheme.split('+')[0]
        p = urllib.parse.urlparse('x://' + rest)
        if base in ('mysql', 'mariadb'):
            import pymysql
            conn = pymysql.connect(host=p.hostname or '127.0.0.1', port=p.port or 3306,
                                   user=p.username or 'root', password=p.password or '')
            with conn.cursor() as cur:
                cur.execute('SHOW DATABASES')
                for (name,) in cur.fetchall():
                    if name.startswith(prefix):
                        cur.execute('DROP DATABASE `%s`' % name)
            conn.close()
        elif base in ('postgresql', 'postgres'):
            import psycopg2
            conn = psycopg2.connect(host=p.hostname or '127.0.0.1', port=p.port or 5432,
                                    user=p.username or 'postgres', dbname='postgres')
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute('SELECT datname FROM pg_database WHERE datname LIKE %s', (prefix + '%',))
                for (name,) in cur.fetchall():
                    cur.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
            conn.close()


if __name__ == '__main__':
    main()
