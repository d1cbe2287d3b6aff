#!/usr/bin/env python3
"""Create the (empty) database named by [placement_database] connection in
the file PLACEMENT_CONFIG_FILE points to, then exec the given command.

The conformance harness starts one server per YAML file with its own
database URL; on MariaDB and PostgreSQL that database must exist first.
SQLite URLs need nothing.
"""
import configparser
import os
import sys
import urllib.parse


def create(url):
    scheme, rest = url.split('://', 1)
    base = scheme.split('+')[0]
    parsed = urllib.parse.urlparse('x://' + rest)
    name = parsed.path.lstrip('/')
    if base in ('mysql', 'mariadb'):
        import pymysql
        conn = pymysql.connect(host=parsed.hostname or '127.0.0.1', port=parsed.port or 3306,
                               user=urllib.parse.unquote(parsed.username or 'root'),
                               password=urllib.parse.unquote(parsed.password or ''))
        with conn.cursor() as cur:
            cur.execute('CREATE DATABASE IF NOT EXISTS `%s`' % name)
        conn.close()
    elif base in ('postgresql', 'postgres'):
        import psycopg2
        conn = psycopg2.connect(host=parsed.hostname or '127.0.0.1', port=parsed.port or 5432,
                                user=urllib.parse.unquote(parsed.username or 'postgres'),
                                password=urllib.parse.unquote(parsed.password or '') or None,
                                dbname='postgres')
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute('SELECT 1 FROM pg_database WHERE datname = %s', (name,))
            if not cur.fetchone():
                cur.execute('CREATE DATABASE "%s"' % name)
        conn.close()


def main():
    conf = configparser.ConfigParser(interpolation=None, strict=False)
    conf.read(os.environ['PLACEMENT_CONFIG_FILE'])
    url = conf.get('placement_database', 'connection', fallback='')
    if url and not url.startswith('sqlite'):
        create(url)
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == '__main__':
    main()
