package io.lakelog.storage;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Arrays;
import java.util.Iterator;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.AWSServiceIOException;
import org.apache.hadoop.fs.s3a.RemoteFileChangedException;

/**
 * A Delta LogStore for S3 (s3a://) that is safe with several writer drivers:
 * a commit file is created with S3's conditional write ({@code PutObject} /
 * {@code CompleteMultipartUpload} with {@code If-None-Match: *}), which S3
 * refuses with 412 Precondition Failed when the key exists.
 *
 * <p>Delta 4.4's default for S3, {@code S3SingleDriverLogStore}, checks
 * existence and writes under a lock of its own JVM only: two drivers
 * committing the same version can both "succeed" and one commit is lost
 * (Delta docs, "Storage configuration": "S3 single-cluster"). Delta 4.4 has
 * no conditional-write LogStore (delta-storage-4.4.0.jar holds none; delta-io/delta
 * later added storage/.../internal/S3ConditionalWrite.java on the same
 * Hadoop option). Hadoop 3.5's S3A sends the condition when a file is built
 * with {@code Options.CreateFileOptionKeys.FS_OPTION_CREATE_CONDITIONAL_OVERWRITE}
 * ("fs.option.create.conditional.overwrite", enabled by
 * fs.s3a.create.conditional.enabled, default true; hadoop-aws
 * ITestS3AConditionalCreateBehavior), and the refusal surfaces at close() as
 * RemoteFileChangedException (412) or, for a race with the completion of
 * a multipart upload, as a 409.
 *
 * <p>S3A retries a PUT whose response was lost; the retry then meets the
 * object its own first attempt created and is refused. To tell that apart
 * from a real conflict, each commit carries a random write id as user
 * metadata ({@code fs.s3a.create.header.*}), read back on a refusal. The
 * Python side (engine/object_store.py, {@code put_if_absent}) writes commit
 * files with the same request and the same metadata key, so JVM and Python
 * writers exclude each other.
 */
public class ConditionalS3LogStore extends HadoopFileSystemLogStore {

    /** User metadata key holding the write id; engine/object_store.py uses the same. */
    public static final String WRITE_ID_KEY = "lakelog-write-id";

    public ConditionalS3LogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        if (overwrite) {
            // _last_checkpoint and the like: last writer wins, as on every store.
            try (FSDataOutputStream out = fs.create(path, true)) {
                writeActions(out, actions);
            }
            return;
        }
        String writeId = UUID.randomUUID().toString();
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path);
        builder.overwrite(false);
        // must(): a file system that cannot do it refuses instead of silently
        // writing without the condition.
        builder.must(Options.CreateFileOptionKeys.FS_OPTION_CREATE_CONDITIONAL_OVERWRITE, true);
        builder.must("fs.s3a.create.header." + WRITE_ID_KEY, writeId);
        FSDataOutputStream out;
        try {
            out = builder.build();
        } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
            // S3A's early existence probe (a HEAD at create time) saw it.
            throw conflict(path, e);
        }
        try {
            writeActions(out, actions);
        } catch (IOException | RuntimeException e) {
            out.close();
            throw e;
        }
        try {
            out.close();
        } catch (IOException e) {
            if (!isRefusal(e)) {
                throw e;
            }
            if (ownWrite(fs, path, writeId)) {
                return;
            }
            throw conflict(path, e);
        }
    }

    private static void writeActions(FSDataOutputStream out, Iterator<String> actions) throws IOException {
        while (actions.hasNext()) {
            out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
    }

    private static boolean isRefusal(IOException e) {
        if (e instanceof RemoteFileChangedException || e instanceof org.apache.hadoop.fs.FileAlreadyExistsException) {
            return true;
        }
        if (e instanceof AWSServiceIOException) {
            int status = ((AWSServiceIOException) e).statusCode();
            return status == 412 || status == 409;
        }
        return false;
    }

    private static boolean ownWrite(FileSystem fs, Path path, String writeId) throws IOException {
        byte[] stored;
        try {
            stored = fs.getXAttr(path, "header." + WRITE_ID_KEY);
        } catch (FileNotFoundException e) {
            // Refused, yet nothing is there (a 409 race lost by both): not ours,
            // and Delta must re-read the log before trying this version again.
            return false;
        }
        return stored != null && Arrays.equals(stored, writeId.getBytes(StandardCharsets.UTF_8));
    }

    private static FileAlreadyExistsException conflict(Path path, Exception cause) {
        // Delta's optimistic transaction expects java.nio's exception: it then
        // reads the winning commit and checks for logical conflicts.
        FileAlreadyExistsException e = new FileAlreadyExistsException(path.toString());
        e.initCause(cause);
        return e;
    }

    /** S3 PUTs are atomic: an object is visible whole or not at all. */
    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;
    }
}
