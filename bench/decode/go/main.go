// Decodes a recorded pod watch stream with client-go's own watch decoder
// (the path a Go informer takes: framer -> streaming serializer -> watch
// event -> typed v1.Pod) and reports throughput. Test tooling for Tally's
// decode benchmark; it reads the same bytes the C++ benchmark reads.
//
//	go run . -json pods_watch.json -protobuf pods_watch.pb -repeat 5
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
)

func decoderFor(mediaType string, body io.ReadCloser) (*restwatch.Decoder, error) {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		return nil, fmt.Errorf("no stream serializer for %s", mediaType)
	}
	frames := info.StreamSerializer.Framer.NewFrameReader(body)
	stream := streaming.NewDecoder(frames, info.StreamSerializer.Serializer)
	// client-go decodes the embedded object with the typed decoder for the group version.
	embedded := scheme.Codecs.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion)
	return restwatch.NewDecoder(stream, embedded), nil
}

type result struct {
	events, pods int
	bytes        int
	elapsed      time.Duration
}

func run(mediaType string, data []byte) (result, error) {
	start := time.Now()
	dec, err := decoderFor(mediaType, io.NopCloser(bytes.NewReader(data)))
	if err != nil {
		return result{}, err
	}
	r := result{bytes: len(data)}
	for {
		_, obj, err := dec.Decode()
		if err == io.EOF {
			break
		}
		if err != nil {
			return r, err
		}
		r.events++
		if _, ok := obj.(*corev1.Pod); ok {
			r.pods++
		}
	}
	r.elapsed = time.Since(start)
	return r, nil
}

func main() {
	jsonPath := flag.String("json", "", "JSON watch stream")
	pbPath := flag.String("protobuf", "", "protobuf watch stream")
	repeat := flag.Int("repeat", 5, "at least this many runs per format (the best is reported)")
	minSeconds := flag.Float64("min-seconds", 0, "and more runs until this much decoding time has passed")
	flag.Parse()
	for _, in := range []struct{ name, path, media string }{
		{"json", *jsonPath, "application/json"},
		{"protobuf", *pbPath, "application/vnd.kubernetes.protobuf"},
	} {
		if in.path == "" {
			continue
		}
		data, err := os.ReadFile(in.path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// The same rule as the C++ side: at least -repeat runs, and more
		// until -min-seconds of decoding has passed (at most 2000).
		var best result
		var total time.Duration
		runs := 0
		for runs < *repeat || (total.Seconds() < *minSeconds && runs < 2000) {
			r, err := run(in.media, data)
			if err != nil {
				fmt.Fprintln(os.Stderr, in.name, err)
				os.Exit(1)
			}
			runs++
			total += r.elapsed
			if best.elapsed == 0 || r.elapsed < best.elapsed {
				best = r
			}
		}
		secs := best.elapsed.Seconds()
		fmt.Printf("client-go %-8s events=%d pods=%d bytes=%d seconds=%.4f MBps=%.1f events_per_s=%.0f runs=%d\n",
			in.name, best.events, best.pods, best.bytes, secs, float64(best.bytes)/secs/1e6, float64(best.events)/secs, runs)
	}
}
