package slurm

import (
	"fmt"
	"syscall"
)

// networkFS are the filesystems whose directories every node can mount at
// the same path, by their statfs magic numbers.
var networkFS = map[int64]string{
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x0bd00bd0: "lustre",
	0x47504653: "gpfs",
	0x00c36400: "cephfs",
	0x19830326: "beegfs",
	0x5346414f: "afs",
	0x01021997: "9p",
	0x7461636f: "ocfs2",
	0x01161970: "gfs2",
}

// localFS names the common local filesystems, for the error message.
var localFS = map[int64]string{
	0xef53:     "ext4",
	0x58465342: "xfs",
	0x9123683e: "btrfs",
	0x01021994: "tmpfs",
	0x2fc12fc1: "zfs",
	0x794c7630: "overlayfs",
	0x65735546: "fuse",
}

// filesystemOf names the filesystem a directory is on and says whether it
// is a network or cluster filesystem.
func filesystemOf(dir string) (name string, network bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unreadable: " + err.Error(), false
	}
	t := int64(st.Type) & 0xffffffff
	if n, ok := networkFS[t]; ok {
		return n, true
	}
	if n, ok := localFS[t]; ok {
		return n, false
	}
	return fmt.Sprintf("filesystem type %#x", t), false
}
