/* version — the one place pacerd's version is written. */
#ifndef PACERD_VERSION_H
#define PACERD_VERSION_H
#define PACERD_VERSION "0.1.0"
#endif
