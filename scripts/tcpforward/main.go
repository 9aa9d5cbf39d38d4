// Command tcpforward is the helper of scripts/bench-collector-reconnect.sh: it
// listens on LISTEN, prints "open <RFC 3339 time>" once it does, and forwards
// every connection to TARGET until killed.
//
//	tcpforward LISTEN TARGET
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: tcpforward LISTEN TARGET")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "tcpforward:", err)
		os.Exit(1)
	}
	fmt.Println("open", time.Now().UTC().Format(time.RFC3339Nano))
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go forward(c, os.Args[2])
	}
}

func forward(c net.Conn, target string) {
	defer c.Close()
	u, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer u.Close()
	go func() {
		_, _ = io.Copy(u, c)
		_ = u.Close()
	}()
	_, _ = io.Copy(c, u)
}
