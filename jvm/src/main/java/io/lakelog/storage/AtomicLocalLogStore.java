package io.lakelog.storage;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * A Delta LogStore for local file systems that is safe with several writer
 * processes.
 *
 * <p>Delta's default for {@code file:} paths (HDFSLogStore) makes "create the
 * commit file unless it exists" atomic only inside one JVM: it checks
 * existence, then renames, and RawLocalFileSystem's rename silently replaces
 * an existing file. Two processes committing the same version can both
 * "succeed" and one commit is lost. Here the commit file is written to a
 * hidden temporary file, forced to disk, and published with link(2), which
 * the kernel refuses atomically when the target exists; that refusal becomes
 * the FileAlreadyExistsException Delta's optimistic concurrency expects.
 */
public class AtomicLocalLogStore extends HadoopFileSystemLogStore {

    public AtomicLocalLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        java.nio.file.Path target = Paths.get(path.toUri());
        java.nio.file.Path dir = target.getParent();
        Files.createDirectories(dir);
        // Not Files.createTempFile: its files are owner-only (0600), and a commit file keeps the
        // mode of the file it is linked from; other users' Delta readers could not read it. A
        // plain new file gets what the process umask gives, as Delta's own writers' files do.
        java.nio.file.Path temp = dir.resolve("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
        try {
            try (FileChannel channel = FileChannel.open(temp, StandardOpenOption.WRITE, StandardOpenOption.CREATE_NEW);
                 OutputStream out = Channels.newOutputStream(channel)) {
                while (actions.hasNext()) {
                    out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
                }
                out.flush();
                channel.force(true);
            }
            if (overwrite) {
                Files.move(temp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } else {
                try {
                    Files.createLink(target, temp);
                } catch (FileAlreadyExistsException e) {
                    throw new FileAlreadyExistsException(path.toString());
                }
            }
        } finally {
            Files.deleteIfExists(temp);
        }
    }

    /**
     * True, as for every local file system: this only concerns files Delta
     * writes by other means than {@link #write} (checkpoints), which Delta
     * then writes to a temporary name and renames. Commit files written here
     * are never partially visible.
     */
    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return true;
    }
}
