package configs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"

	"gopkg.in/ini.v1"
)

// Where DISCredentials came from (DISCredentials.Source).
const (
	CredentialsFromAK    = "dis_ak"
	CredentialsFromToken = "dis_token"
	CredentialsFromFile  = "dis_credentials_file"
)

// The credentials file is the Huawei Cloud SDK's profile file
// (~/.huaweicloud/credentials, read by the SDK's
// core/auth/provider.ProfileCredentialProvider): INI, parsed by the same
// library the SDK uses (gopkg.in/ini.v1), with the regional credentials in
// the [basic] section.
const (
	credentialsSection   = "basic"
	credentialsAK        = "ak"
	credentialsSK        = "sk"
	credentialsProjectID = "project_id"
	credentialsSTSToken  = "security_token"
	credentialsIdpID     = "idp_id"
	credentialsIDToken   = "id_token_file"

	// maxCredentialsFileBytes bounds what is read of the file; the SDK's
	// file is a few hundred bytes.
	maxCredentialsFileBytes = 64 << 10
)

// DISCredentials are what the DIS backend authenticates with: an access key
// pair (with SecurityToken when it is a temporary one), or an IAM token.
// String and GoString never show a secret, so printing the struct does not
// leak one.
type DISCredentials struct {
	AK, SK string
	// SecurityToken goes with a temporary access key pair (the file's
	// security_token); sent as X-Security-Token.
	SecurityToken string
	// Token is an IAM token (dis_token), used when there is no AK.
	Token string
	// ProjectID is dis_project_id, or the file's project_id when
	// dis_project_id is empty.
	ProjectID string
	// Source is where the secrets came from: CredentialsFromAK,
	// CredentialsFromToken or CredentialsFromFile.
	Source string
	// File is the credentials file read (Source CredentialsFromFile), or
	// the one not read because dis_ak or dis_token took precedence.
	File string
	// Warning, when not empty, is a problem that does not stop start-up:
	// the file is open to group or others. It never holds a secret.
	Warning string
}

// String describes c without its secrets.
func (c DISCredentials) String() string {
	if c.Source == CredentialsFromFile {
		return fmt.Sprintf("DIS credentials from %s %s", c.Source, c.File)
	}
	return "DIS credentials from " + c.Source
}

// GoString is String, so %#v does not print secrets either.
func (c DISCredentials) GoString() string { return c.String() }

// DISCredentials returns the credentials of backend dis. dis_ak and dis_sk,
// or dis_token, from whichever source (normally DISGW_DIS_AK, DISGW_DIS_SK,
// DISGW_DIS_TOKEN) take precedence over dis_credentials_file, which is then
// not read. Otherwise the file's [basic] section gives ak and sk, and
// optionally security_token and project_id (dis_project_id wins).
//
// Errors name the file and what is wrong with it, never a value from it:
// the file is missing or unreadable, is not INI, has no [basic] section, or
// has no ak and sk there. c should have passed Validate.
func (c Config) DISCredentials() (DISCredentials, error) {
	switch {
	case c.DISAK != "":
		return DISCredentials{AK: c.DISAK, SK: c.DISSK, ProjectID: c.DISProjectID,
			Source: CredentialsFromAK, File: c.DISCredentialsFile}, nil
	case c.DISToken != "":
		return DISCredentials{Token: c.DISToken, ProjectID: c.DISProjectID,
			Source: CredentialsFromToken, File: c.DISCredentialsFile}, nil
	case c.DISCredentialsFile == "":
		return DISCredentials{}, errors.New("backend dis needs credentials: DISGW_DIS_AK and DISGW_DIS_SK, DISGW_DIS_TOKEN, or dis_credentials_file")
	}
	cr, err := ReadCredentialsFile(c.DISCredentialsFile, CredentialsFromFile)
	if err != nil {
		return DISCredentials{}, err
	}
	if c.DISProjectID != "" {
		cr.ProjectID = c.DISProjectID
	}
	if cr.ProjectID == "" {
		return DISCredentials{}, fmt.Errorf("dis_credentials_file %s: [%s] has no %s and dis_project_id is not set",
			c.DISCredentialsFile, credentialsSection, credentialsProjectID)
	}
	return cr, nil
}

// ReadCredentialsFile reads the [basic] section of the SDK credentials file
// at path: ak and sk (both required), optionally security_token and
// project_id; Source is CredentialsFromFile. setting is how the caller's
// user names the file (dis_credentials_file, --credentials-file): errors and
// the Warning start with it and the path. Errors (the file is missing,
// unreadable, a directory, over 64 KiB, not INI, without [basic] or
// without ak and sk) never quote the file's content (the INI parser's
// messages can quote a line, which may hold a secret). A file open to group
// or others is returned with a Warning, not an error.
func ReadCredentialsFile(path, setting string) (DISCredentials, error) {
	bad := func(format string, args ...any) (DISCredentials, error) {
		return DISCredentials{}, fmt.Errorf("%s %s: %s", setting, path, fmt.Sprintf(format, args...))
	}
	osErr := func(err error) (DISCredentials, error) {
		return DISCredentials{}, fmt.Errorf("%s %s: %w", setting, path, pathErr(err))
	}
	f, err := os.Open(path)
	if err != nil {
		return osErr(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return osErr(err)
	}
	if fi.IsDir() {
		return bad("is a directory")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCredentialsFileBytes+1))
	if err != nil {
		return osErr(err)
	}
	if len(data) > maxCredentialsFileBytes {
		return bad("is larger than %d KiB; not a credentials file", maxCredentialsFileBytes>>10)
	}
	file, err := ini.Load(data)
	if err != nil {
		return bad("not in the INI format of ~/.huaweicloud/credentials ([%s] then lines key = value); "+
			"the parser's message is not shown, as it may quote a secret", credentialsSection)
	}
	sec, err := file.GetSection(credentialsSection)
	if err != nil {
		return bad("has no [%s] section", credentialsSection)
	}
	get := func(k string) string { return sec.Key(k).String() }
	cr := DISCredentials{
		AK: get(credentialsAK), SK: get(credentialsSK),
		SecurityToken: get(credentialsSTSToken), ProjectID: get(credentialsProjectID),
		Source: CredentialsFromFile, File: path,
	}
	switch {
	case cr.AK != "" && cr.SK != "":
	case cr.AK != "":
		return bad("[%s] has %s but no %s", credentialsSection, credentialsAK, credentialsSK)
	case cr.SK != "":
		return bad("[%s] has %s but no %s", credentialsSection, credentialsSK, credentialsAK)
	case get(credentialsIdpID) != "" || get(credentialsIDToken) != "":
		return bad("[%s] has %s/%s (federated identity), which disgw does not support; give %s and %s",
			credentialsSection, credentialsIdpID, credentialsIDToken, credentialsAK, credentialsSK)
	default:
		return bad("[%s] has no %s and %s", credentialsSection, credentialsAK, credentialsSK)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		cr.Warning = fmt.Sprintf("%s %s is open to group or others (mode %04o); "+
			"like an SSH key it should be readable by its owner only (chmod 600)", setting, path, perm)
	}
	return cr, nil
}

// pathErr drops the operation and path of a *fs.PathError, which the
// caller's message already names.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
