//! The artifact writers: deb, rpm, tarball.
