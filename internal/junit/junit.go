// Package junit writes JUnit XML, the test report CI systems read, for
// the audit's and connaudit serve's reports. It is not API.
package junit

import (
	"encoding/xml"
	"io"
)

// Suites is a JUnit document: its test suites.
type Suites struct {
	XMLName xml.Name `xml:"testsuites"`
	Suites  []Suite  `xml:"testsuite"`
}

// Suite is one test suite and its counts.
type Suite struct {
	Name     string `xml:"name,attr"`
	Tests    int    `xml:"tests,attr"`
	Failures int    `xml:"failures,attr"`
	Skipped  int    `xml:"skipped,attr"`
	Time     string `xml:"time,attr"`
	Cases    []Case `xml:"testcase"`
}

// Case is one test case: passed, skipped or failed.
type Case struct {
	Name      string   `xml:"name,attr"`
	Classname string   `xml:"classname,attr"`
	Time      string   `xml:"time,attr"`
	Skipped   *Skipped `xml:"skipped,omitempty"`
	Failure   *Failure `xml:"failure,omitempty"`
	SystemOut string   `xml:"system-out,omitempty"`
}

// Failure says why a case failed: a line, then the whole text.
type Failure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// Skipped says why a case was not run.
type Skipped struct {
	Message string `xml:"message,attr"`
}

// Write writes s to w as an indented XML document.
func Write(w io.Writer, s Suites) error {
	st := NewStream(w)
	for _, suite := range s.Suites {
		st.Add(suite)
	}
	return st.Close()
}
