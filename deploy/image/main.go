// Command image builds Sluice's container image without a daemon or a
// registry: one OCI image for every role, FROM scratch, holding the static
// sluice binary, the CA certificates and the time-zone database, run as a
// numeric non-root user. It writes an OCI image layout (a directory any OCI
// tool reads: skopeo, crane, podman, containerd's import) and the same
// image as a tarball `docker load` and `podman load` take, then checks what
// it wrote: the layout reads back, its configuration names a non-root
// user, and the binary taken out of its layer runs `sluice version`.
//
// It is built on go-containerregistry, the library under crane and ko:
// crane can append a layer to an empty base offline, but sets the image's
// configuration (user, entrypoint, labels) only on an image in a registry,
// and ko fetches a base image; the library's empty image, mutate and
// layout packages do all of it on local files.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: a numeric uid and gid that exist in no base image, so
// no file in the image is theirs but the ones they need to read, and
// Kubernetes' runAsNonRoot can check them without a passwd lookup.
const (
	uid = 65532
	gid = 65532
)

// Where the files sit in the image. Go reads the CA bundle from
// caPath by default, and the time-zone database from the zip ZONEINFO
// names.
const (
	binaryPath   = "sluice"
	caPath       = "etc/ssl/certs/ca-certificates.crt"
	zoneinfoPath = "usr/share/zoneinfo.zip"
)

type options struct {
	binary, caCerts, zoneinfo   string
	layoutDir, tarballPath, tag string
	version, revision, source   string
	created                     time.Time
}

func main() {
	var o options
	var epoch int64
	flag.StringVar(&o.binary, "binary", "bin/sluice-linux-amd64", "the static sluice binary")
	flag.StringVar(&o.caCerts, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to ship")
	flag.StringVar(&o.zoneinfo, "zoneinfo", "", "the time-zone database zip (default: the Go toolchain's lib/time/zoneinfo.zip)")
	flag.StringVar(&o.layoutDir, "layout", "bin/image/oci", "the OCI image layout directory to write (replaced)")
	flag.StringVar(&o.tarballPath, "tarball", "bin/image/sluice.tar", "the docker-load tarball to write")
	flag.StringVar(&o.tag, "tag", "sluice:dev", "the image's name and tag in the tarball and the layout")
	flag.StringVar(&o.version, "version", "dev", "org.opencontainers.image.version")
	flag.StringVar(&o.revision, "revision", "unknown", "org.opencontainers.image.revision")
	flag.StringVar(&o.source, "source", "https://github.com/sluicehq/sluice", "org.opencontainers.image.source")
	flag.Int64Var(&epoch, "source-date-epoch", 0, "the creation time of the image and its files (the commit's time makes the build reproducible)")
	flag.Parse()
	o.created = time.Unix(epoch, 0).UTC()
	if o.zoneinfo == "" {
		goroot, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			fail(fmt.Errorf("finding the toolchain's zoneinfo.zip: %w", err))
		}
		o.zoneinfo = filepath.Join(strings.TrimSpace(string(goroot)), "lib", "time", "zoneinfo.zip")
	}
	img, err := build(o)
	if err != nil {
		fail(err)
	}
	if err := write(o, img); err != nil {
		fail(err)
	}
	if err := verify(o); err != nil {
		fail(fmt.Errorf("the written image fails its check: %w", err))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

// file is one regular file or directory of the layer.
type file struct {
	path string
	mode int64
	data []byte
	dir  bool
}

// build assembles the image: one layer on the empty image, OCI media
// types, and the configuration.
func build(o options) (v1.Image, error) {
	var files []file
	for _, dir := range []string{"etc", "etc/ssl", "etc/ssl/certs", "tmp", "usr", "usr/share"} {
		mode := int64(0o755)
		if dir == "tmp" {
			mode = 0o1777
		}
		files = append(files, file{path: dir, mode: mode, dir: true})
	}
	for _, f := range []struct {
		path, from string
		mode       int64
	}{{binaryPath, o.binary, 0o555}, {caPath, o.caCerts, 0o444}, {zoneinfoPath, o.zoneinfo, 0o444}} {
		data, err := os.ReadFile(f.from)
		if err != nil {
			return nil, err
		}
		files = append(files, file{path: f.path, mode: f.mode, data: data})
	}
	files = append(files,
		file{path: "etc/passwd", mode: 0o444, data: fmt.Appendf(nil, "root:x:0:0:root:/:/sbin/nologin\nsluice:x:%d:%d:sluice:/:/sbin/nologin\n", uid, gid)},
		file{path: "etc/group", mode: 0o444, data: fmt.Appendf(nil, "root:x:0:\nsluice:x:%d:\n", gid)},
	)
	layerTar, err := tarOf(files, o.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.created}, CreatedBy: "deploy/image: sluice, CA certificates, time-zone database", Comment: "FROM scratch",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: o.created}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, gid),
		Entrypoint: []string{"/" + binaryPath},
		Cmd:        []string{"all"},
		Env:        []string{"ZONEINFO=/" + zoneinfoPath, "SLUICE_HTTP_ADDR=0.0.0.0:8080", "SLUICE_ADMIN_ADDR=0.0.0.0:9090"},
		ExposedPorts: map[string]struct{}{
			"8080/tcp": {}, "9090/tcp": {},
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "sluice",
			"org.opencontainers.image.source":   o.source,
			"org.opencontainers.image.version":  o.version,
			"org.opencontainers.image.revision": o.revision,
			"org.opencontainers.image.created":  o.created.Format(time.RFC3339),
		},
	}
	return mutate.ConfigFile(img, cf)
}

// tarOf writes files as a tar stream owned by root, every time stamp at
// created, in the given order, so the same inputs give the same layer.
func tarOf(files []file, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, ModTime: created, Typeflag: tar.TypeReg, Size: int64(len(f.data)), Format: tar.FormatPAX}
		if f.dir {
			h.Name, h.Typeflag, h.Size = f.path+"/", tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// write replaces the layout directory and the tarball with img, and
// prints its size.
func write(o options, img v1.Image) error {
	ref, err := name.NewTag(o.tag, name.WithDefaultRegistry(""))
	if err != nil {
		return fmt.Errorf("-tag: %w", err)
	}
	if err := os.RemoveAll(o.layoutDir); err != nil {
		return err
	}
	p, err := layout.Write(o.layoutDir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.TagStr()})); err != nil {
		return err
	}
	if err := tarball.WriteToFile(o.tarballPath, ref, img); err != nil {
		return err
	}
	size, unpacked, err := sizes(img)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("image %s %s\n  size: %.1f MB compressed, %.1f MB unpacked (target: under 40 MB)\n  layout: %s\n  tarball: %s\n",
		ref.Name(), digest, float64(size)/1e6, float64(unpacked)/1e6, o.layoutDir, o.tarballPath)
	return nil
}

// sizes are the image's bytes as pulled (manifest, config and compressed
// layers) and its layers' bytes unpacked.
func sizes(img v1.Image) (pulled, unpacked int64, err error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, 0, err
	}
	pulled = int64(len(raw)) + m.Config.Size
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, err
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return 0, 0, err
		}
		pulled += n
		rc, err := l.Uncompressed()
		if err != nil {
			return 0, 0, err
		}
		u, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return 0, 0, err
		}
		unpacked += u
	}
	return pulled, unpacked, nil
}

// verify reads the layout back as an OCI tool would, checks that its user
// is numeric and not root, takes the binary out of the image's filesystem
// and runs `sluice version`, which must name the image's version and
// revision.
func verify(o options) error {
	p, err := layout.FromPath(o.layoutDir)
	if err != nil {
		return err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(im.Manifests) != 1 {
		return fmt.Errorf("layout holds %d manifests, want 1", len(im.Manifests))
	}
	img, err := p.Image(im.Manifests[0].Digest)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	user, group, _ := strings.Cut(cf.Config.User, ":")
	if n, err := strconv.Atoi(user); err != nil || n == 0 {
		return fmt.Errorf("image user %q is not a numeric non-root uid", cf.Config.User)
	}
	if n, err := strconv.Atoi(group); err != nil || n == 0 {
		return fmt.Errorf("image group %q is not a numeric non-root gid", cf.Config.User)
	}
	dir, err := os.MkdirTemp("", "sluice-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "sluice")
	if err := extractFile(img, binaryPath, bin); err != nil {
		return err
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("the image's sluice version: %w: %s", err, out)
	}
	want := fmt.Sprintf("sluice %s (revision %s)\n", o.version, o.revision)
	if string(out) != want {
		return fmt.Errorf("the image's sluice version printed %q, want %q", out, want)
	}
	fmt.Printf("  checked: user %s, `sluice version` from the image: %s", cf.Config.User, out)
	return nil
}

// extractFile copies the image's file at path to dst.
func extractFile(img v1.Image, path, dst string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s is not in the image", path)
		}
		if err != nil {
			return err
		}
		if strings.TrimPrefix(h.Name, "/") != path {
			continue
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
}
