/* Small filesystem helpers for the data directory. */
#ifndef ATTNLAB_FSUTIL_H
#define ATTNLAB_FSUTIL_H

/* mkdir -p; 0 on success. */
int fs_mkdirs(const char *path);
/* rm -r of a folder that attnlab made (does not follow symlinks); 0 on success or if absent. */
int fs_remove_tree(const char *path);

#endif
